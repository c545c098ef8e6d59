
# Copyright (c) rollout_fdw authors
#
# 039_parallel_scan.pl — a rollout table scanned by parallel workers
# (fdw/scan_parallel.c): the participants split the key space, so that
# every key is merged by exactly one of them, and read the leader's
# snapshot.
#   (a) many versions per key across the base, two generations and the
#       unflushed tail (WAL entries, or the memtable when preloaded): a
#       parallel aggregate, a parallel ORDER BY key (Gather Merge, no Sort)
#       and a parallel key range return exactly what the serial scan and a
#       heap oracle return, and every worker returned rows;
#   (b) the transaction's own rows, in memory and spilled to a scratch
#       segment, are seen by the workers;
#   (c) REPEATABLE READ: a parallel scan reads the transaction's snapshot,
#       not the rows committed since;
#   (d) while writers upsert and insert and flush, merge and compaction run
#       in a loop, every parallel scan sees each key once (count = distinct
#       count, the sum of an invariant column exact, no old key missing),
#       and within one REPEATABLE READ transaction the parallel result
#       equals the serial one.
#
# Backends: all

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use PsqlScript;
use RolloutStore;
use RolloutTest qw(mode_node plan_node_types find_plan_node loop_size);
use Test::More;
use Time::HiRes qw(time);

my $started = time;
sub section_took { note(sprintf('%s: %.1f s', $_[0], time - $started)); $started = time; }

my $node = mode_node('parallel', conf => [
	'rollout_fdw.rows_per_group = 500',
	'max_worker_processes = 8', 'max_parallel_workers = 8']);
my $store = RolloutStore->for_test('039_parallel_scan');
$store->create_extension_and_server($node);

# settings that make the planner choose a parallel plan for small tables
my $parallel = q{SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;};
my $serial = q{SET max_parallel_workers_per_gather = 0;};

sub plan_json
{
	my ($settings, $sql) = @_;
	my $out = $node->safe_psql('postgres',
		"$settings EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, FORMAT JSON) $sql");
	$out =~ s/^.*?(\[\s*\{)/$1/s;
	return decode_json($out)->[0]{Plan};
}



# $sql's result with the parallel and the serial settings
sub both
{
	my ($sql) = @_;
	return ($node->safe_psql('postgres', "$parallel $sql"),
		$node->safe_psql('postgres', "$serial $sql"));
}

# ---------------------------------------------------------------------------
# (a) versions across the base, generations and the tail
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE p (id bigint, v int, pad text) SERVER s OPTIONS (store 'par');
CREATE TABLE h (id bigint PRIMARY KEY, v int, pad text);
INSERT INTO p SELECT i, i, 'base' FROM generate_series(1, 20000) i;
SELECT rollout_flush('p'); SELECT rollout_merge('p');
INSERT INTO p SELECT i, i + 1, 'gen1' FROM generate_series(1, 20000, 3) i;
SELECT rollout_flush('p');
INSERT INTO p SELECT i, i + 2, 'gen2' FROM generate_series(1, 20000, 5) i;
INSERT INTO p SELECT i, i, 'gen2' FROM generate_series(20001, 21000) i;
SELECT rollout_flush('p');});
# the tail: 40 transactions of upserts and new keys (8 on a remote store,
# where each is a WAL PUT)
my $tail = loop_size(file => 40, remote => 8);
$node->safe_psql('postgres', join("\n", map {
	"INSERT INTO p SELECT i, i + 3, 'tail' FROM generate_series($_, 21000, 97) i;"
	  . "INSERT INTO p VALUES (" . (30000 + $_) . ", 7, 'new');"
} 1 .. $tail));
$node->safe_psql('postgres', q{
INSERT INTO h SELECT i, i, 'base' FROM generate_series(1, 20000) i;
INSERT INTO h SELECT i, i + 1, 'gen1' FROM generate_series(1, 20000, 3) i
  ON CONFLICT (id) DO UPDATE SET v = excluded.v, pad = excluded.pad;
INSERT INTO h SELECT i, i + 2, 'gen2' FROM generate_series(1, 20000, 5) i
  ON CONFLICT (id) DO UPDATE SET v = excluded.v, pad = excluded.pad;
INSERT INTO h SELECT i, i, 'gen2' FROM generate_series(20001, 21000) i;});
$node->safe_psql('postgres', join("\n", map {
	"INSERT INTO h SELECT i, i + 3, 'tail' FROM generate_series($_, 21000, 97) i"
	  . " ON CONFLICT (id) DO UPDATE SET v = excluded.v, pad = excluded.pad;"
	  . "INSERT INTO h VALUES (" . (30000 + $_) . ", 7, 'new');"
} 1 .. $tail));

my $aggregate = q{SELECT count(*), count(DISTINCT id), sum(v), sum(hashtext(pad)::bigint) FROM};
my $plan = plan_json($parallel, "$aggregate p");
my $scan = find_plan_node($plan, 'Foreign Scan');
ok($scan && $scan->{'Parallel Aware'}, 'the aggregate runs a parallel foreign scan');
my $gather = find_plan_node($plan, 'Gather');
is($gather && $gather->{'Workers Launched'}, 2, 'two workers were launched');
cmp_ok($scan->{'Key Space Parts'} // 0, '>=', 3, 'the key space was cut into parts');
# without the leader reading, the workers returned every row between them
$scan = find_plan_node(plan_json("$parallel SET parallel_leader_participation = off;", "$aggregate p"),
	'Foreign Scan');
my $worker_rows = 0;
$worker_rows += ($_->{'Actual Rows'} // 0) for @{ $scan->{Workers} // [] };
is($worker_rows, $node->safe_psql('postgres', 'SELECT count(*) FROM h'),
	'parallel_leader_participation = off: the workers returned all rows');

my $heap = $node->safe_psql('postgres', "$aggregate h");
my ($par, $ser) = both("$aggregate p");
is($par, $heap, "parallel aggregate equals the heap oracle ($heap)");
is($ser, $heap, 'serial aggregate equals the heap oracle');

my $ordered = q{SELECT md5(string_agg(id || ':' || v || pad, ',' ORDER BY ord)) FROM
  (SELECT id, v, pad, row_number() OVER () AS ord FROM (SELECT * FROM %s ORDER BY id) o) s};
$plan = plan_json($parallel, 'SELECT * FROM p ORDER BY id');
my @types = plan_node_types($plan);
ok((grep { $_ eq 'Gather Merge' } @types) && !(grep { $_ eq 'Sort' } @types),
	"ORDER BY key: a Gather Merge of the workers' key-ordered rows, no Sort (@types)");
($par, $ser) = both(sprintf($ordered, 'p'));
is($par, $node->safe_psql('postgres', sprintf($ordered, 'h')),
	'parallel ORDER BY key returns the heap\'s rows in its order');

my $range = "$aggregate %s WHERE id BETWEEN 5000 AND 15000";
$scan = find_plan_node(plan_json($parallel, sprintf($range, 'p')), 'Foreign Scan');
ok($scan && $scan->{'Parallel Aware'}, 'a key range runs in parallel too');
($par, $ser) = both(sprintf($range, 'p'));
is($par, $node->safe_psql('postgres', sprintf($range, 'h')),
	'parallel key range equals the heap oracle');
$scan = find_plan_node(plan_json($parallel, 'SELECT * FROM p WHERE id = 77'), 'Foreign Scan');
ok(!$scan->{'Parallel Aware'}, 'a key lookup is not parallel');

# no worker at all: the leader reads every part alone
$plan = plan_json("$parallel SET max_parallel_workers = 0;", "$aggregate p");
is(find_plan_node($plan, 'Gather')->{'Workers Launched'}, 0, 'max_parallel_workers = 0: no worker launched');
is($node->safe_psql('postgres', "$parallel SET max_parallel_workers = 0; $aggregate p"), $heap,
	'... and the leader alone returns every row once');

# a Gather rescanned: the parallel scan under a correlated subquery
my $rescan = q{SELECT string_agg(c::text, ',' ORDER BY x) FROM (SELECT x, (SELECT count(*) FROM %s t
  WHERE t.v > x) AS c FROM (VALUES (0), (10000), (20000)) o(x)) s};
($par, $ser) = both(sprintf($rescan, 'p'));
is($par, $node->safe_psql('postgres', sprintf($rescan, 'h')), 'a rescanned parallel scan: each rescan equals the heap');

# a text key (values passed by reference) in a merged store: no WAL entry,
# so each participant gets several parts
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE tk (id text COLLATE "C", v int) SERVER s OPTIONS (store 'par_text');
CREATE TABLE tkh (id text COLLATE "C" PRIMARY KEY, v int);
INSERT INTO tk SELECT md5(i::text), i FROM generate_series(1, 12000) i;
SELECT rollout_flush('tk'); SELECT rollout_merge('tk');
INSERT INTO tk SELECT md5(i::text), -i FROM generate_series(1, 12000, 4) i;
SELECT rollout_flush('tk');
INSERT INTO tkh SELECT md5(i::text), CASE WHEN i % 4 = 1 THEN -i ELSE i END FROM generate_series(1, 12000) i;});
$scan = find_plan_node(plan_json($parallel, 'SELECT count(*), sum(v) FROM tk'), 'Foreign Scan');
is($scan->{'Key Space Parts'}, 12, 'text key, flushed: 4 parts per participant');
($par, $ser) = both('SELECT count(*), count(DISTINCT id), sum(v) FROM tk');
is($par, $node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id), sum(v) FROM tkh'),
	'text key: the parallel aggregate equals the heap');
my $ordered_tk = q{SELECT md5(string_agg(id || ':' || v, ',' ORDER BY ord)) FROM
  (SELECT id, v, row_number() OVER () AS ord FROM (SELECT * FROM %s ORDER BY id) o) s};
($par, $ser) = both(sprintf($ordered_tk, 'tk'));
is($par, $node->safe_psql('postgres', sprintf($ordered_tk, 'tkh')), 'text key: ORDER BY key across 12 parts');
is($node->safe_psql('postgres', "$parallel SELECT string_agg(id, ',') FROM (SELECT id FROM tk ORDER BY id LIMIT 7) s"),
	$node->safe_psql('postgres', "SELECT string_agg(id, ',') FROM (SELECT id FROM tkh ORDER BY id LIMIT 7) s"),
	'text key: ORDER BY key LIMIT 7');

section_took('(a)');

# ---------------------------------------------------------------------------
# (b) the transaction's own rows, in memory, then spilled
for my $case ([ '8MB', 'in memory' ], [ '64kB', 'spilled to a scratch segment' ])
{
	my ($size, $label) = @$case;
	my $out = $node->safe_psql('postgres', qq{
SET rollout_fdw.transaction_buffer_size = '$size';
BEGIN;
INSERT INTO p SELECT i, -1, 'own' FROM generate_series(1, 21000, 2) i;
INSERT INTO p SELECT i, -1, 'own' FROM generate_series(40001, 45000) i;
$parallel
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) $aggregate p;
$aggregate p;
$serial
$aggregate p;
ROLLBACK;});
	my @lines = split /\n/, $out;
	my ($p_res, $s_res) = @lines[-2, -1];
	like($out, qr/Workers Launched: 2/, "own rows $label: two workers launched");
	is($p_res, $s_res, "own rows $label: the parallel scan sees what the serial one does ($s_res)");
	my ($count) = split /\|/, $p_res;
	is($count, 21000 + $tail + 5000, "own rows $label: 5,000 new keys added, none twice");
}

section_took('(b)');

# ---------------------------------------------------------------------------
# (c) REPEATABLE READ reads the transaction's snapshot
my $rr = $node->background_psql('postgres');
$rr->query_safe("BEGIN ISOLATION LEVEL REPEATABLE READ; $parallel");
my $before = $rr->query_safe("$aggregate p");
$node->safe_psql('postgres', q{INSERT INTO p SELECT i, 1, 'later' FROM generate_series(50001, 50500) i;
SELECT rollout_flush('p');});
is($rr->query_safe("$aggregate p"), $before,
	'REPEATABLE READ: a parallel scan after a commit and a flush reads the transaction\'s snapshot');
like($rr->query_safe("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) $aggregate p"),
	qr/Workers Launched: 2/, 'REPEATABLE READ: that scan was parallel');
$rr->query_safe('COMMIT');
isnt($rr->query_safe("$aggregate p"), $before, 'the next transaction sees the 500 new rows');
$rr->quit;

section_took('(c)');

# ---------------------------------------------------------------------------
# (d) writers and maintenance at work.  Keys 1..5000 hold v = id forever:
# the writers upsert them with v = id and a new pad, and add keys >= 100000
# with v = 0, so every consistent read has sum(v) over id <= 5000 =
# 5000 * 5001 / 2 and each key once.  On a remote store, where each commit
# is a WAL PUT, the writers commit fewer transactions.
my $writes = loop_size(file => 250, remote => 30);
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE w (id bigint, v int, pad text) SERVER s OPTIONS (store 'par_w');
INSERT INTO w SELECT i, i, 'start' FROM generate_series(1, 5000) i;
SELECT rollout_flush('w'); SELECT rollout_merge('w');});
my @writers = map {
	my $w = $_;
	PsqlScript->start($node, name => "writer$w", sql => join("\n", map {
		my $k = $w * 1000000 + $_;
		"INSERT INTO w SELECT i, i, 'w$w.$_' FROM generate_series($_ % 50 + 1, 5000, 37) i;"
		  . "INSERT INTO w VALUES ($k, 0, 'new');"
	} 1 .. $writes));
} 1 .. 2;
my $maintenance = PsqlScript->start($node, name => 'maintenance', sql => join("\n", map {
	"SELECT rollout_flush('w'); SELECT rollout_merge('w');"
	  . ($_ % 3 == 0 ? "SELECT rollout_compact('w', min_fragments => 1);" : '')
	  . "SELECT pg_sleep(0.05);"
} 1 .. ($writes / 10)));

my $invariant = q{SELECT count(*) = count(DISTINCT id), sum(v) FILTER (WHERE id <= 5000),
  count(*) FILTER (WHERE id <= 5000) FROM w};
my ($bad, $unequal, $rounds) = (0, 0, 0);
for my $round (1 .. loop_size(file => 12, remote => 4))
{
	my $result = $node->safe_psql('postgres', "$parallel $invariant");
	$bad++, diag("round $round: $result") unless $result eq 't|' . (5000 * 5001 / 2) . '|5000';
	my $pair = $node->safe_psql('postgres', "BEGIN ISOLATION LEVEL REPEATABLE READ;
$parallel SELECT count(*), sum(hashtext(pad)::bigint) FROM w;
$serial SELECT count(*), sum(hashtext(pad)::bigint) FROM w; COMMIT;");
	my @pair = split /\n/, $pair;
	$unequal++, diag("round $round: @pair") unless @pair == 2 && $pair[0] eq $pair[1];
	$rounds++;
}
section_took('(d) scans');
is($bad, 0, "$rounds parallel scans during writes and maintenance: each key once, the invariant sum exact");
is($unequal, 0, 'in one REPEATABLE READ transaction the parallel and the serial scan agree');
for my $script (@writers, $maintenance)
{
	my ($ret, undef, $err) = $script->finish;
	is($ret, 0, 'a writer or the maintenance loop succeeded') or diag($err);
}
is($node->safe_psql('postgres', "$parallel $invariant"), 't|' . (5000 * 5001 / 2) . '|5000',
	'after them: the invariant holds');
my ($p_all, $s_all) = both('SELECT count(*), sum(hashtext(pad)::bigint) FROM w');
is($p_all, $s_all, 'after them: parallel equals serial');
is((split /\|/, $p_all)[0], 5000 + 2 * $writes, 'and the ' . 2 * $writes . ' new keys are there');

section_took('(d)');
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');
$node->stop;
done_testing();
