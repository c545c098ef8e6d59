
# Copyright (c) rollout_fdw authors
#
# 037_planner.pl — what the planner knows of a rollout table:
#   (a) row estimates from metadata (fdw/scan_estimate.c): EXPLAIN's row count
#       is within 2x of count(*) for stores of 1,000 and 100,000 rows, whether
#       the rows sit in WAL entries or the memtable, generations or the base,
#       and a backend's own commit shows in its next plan at once;
#   (b) ANALYZE (fdw/analyze.c) samples the deduplicated rows: pg_class
#       .reltuples is the exact live row count although every key has
#       several versions, pg_stats gets n_distinct and most common values,
#       and filter and range estimates use them;
#   (c) sorted output: the merged read's key order is claimed where it is
#       the key column's ORDER BY order (int and uuid keys, text under
#       "C"), so ORDER BY key LIMIT needs no Sort and reads only the first
#       row groups, and a merge join on the key sorts neither rollout side;
#       a text key under a non-"C" collation claims nothing and is sorted,
#       and every ordered result equals the heap's;
#   (d) key joins: a join of a few ids with a large store becomes a nested
#       loop of key lookups on its own (a parameterized path), for a join
#       written with ON, with USING and as LATERAL, reads a row group per
#       outer row instead of the store, and returns what a hash join does,
#       also with a range condition on the key besides the join's equality
#       and as a LEFT JOIN;
#   (e) zone maps in the cost: ANALYZE hands its sample over in key order, so
#       pg_stats.correlation of a column that follows the key is near 1 and
#       of a random one near 0; a narrow range on the former is costed as
#       the few row groups zone maps leave (a serial scan, no Gather), on
#       the latter as a scan of everything (in parallel where it is worth
#       it), and both return what the heap returns.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node plan_node_types find_plan_node);
use Test::More;

my $node = mode_node('planner', conf => ['rollout_fdw.rows_per_group = 500']);
my $store = RolloutStore->for_test('037_planner');
$store->create_extension_and_server($node);

# The plan of $sql as decoded EXPLAIN (FORMAT JSON) output (its top node).
sub plan_of
{
	my ($sql, $options) = @_;
	$options = $options ? ", $options" : '';
	my $json = $node->safe_psql('postgres', "EXPLAIN (FORMAT JSON$options) $sql");
	return decode_json($json)->[0]{Plan};
}



sub within_2x
{
	my ($estimate, $actual, $label) = @_;
	ok($estimate >= $actual / 2 && $estimate <= $actual * 2,
		"$label: estimate $estimate is within 2x of $actual");
}

sub estimate_vs_count
{
	my ($table, $label) = @_;
	my $count = $node->safe_psql('postgres', "SELECT count(*) FROM $table");
	within_2x(plan_of("SELECT * FROM $table")->{'Plan Rows'}, $count, $label);
}

# ---------------------------------------------------------------------------
# (a) estimates from metadata
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE e (id bigint, grp int, payload text) SERVER s OPTIONS (store 'est');});
is(plan_of('SELECT * FROM e')->{'Plan Rows'}, 1, 'an empty store is estimated at one row');

# 1,000 rows in 200 transactions: WAL entries (plain) or the memtable (preload)
my $five = join("\n", map {
		my $b = $_ * 5;
		"INSERT INTO e SELECT i, i % 100, repeat('x', 50) FROM generate_series($b + 1, $b + 5) i;"
	} 0 .. 199);
$node->safe_psql('postgres', $five);
estimate_vs_count('e', '1,000 rows, unflushed');

$node->safe_psql('postgres', q{SELECT rollout_flush('e')});
estimate_vs_count('e', '1,000 rows in a generation');

# one backend: its own commit shows in its next plan, with no scan between
my $own = $node->safe_psql('postgres', q{
EXPLAIN SELECT * FROM e;
INSERT INTO e SELECT i, i % 100, 'y' FROM generate_series(1001, 100000) i;
EXPLAIN (FORMAT JSON) SELECT * FROM e;});
$own =~ s/^.*?(\[\s*\{)/$1/s;
within_2x(decode_json($own)->[0]{Plan}{'Plan Rows'}, 100000,
	'100,000 rows, planned right after the same session inserted them');
estimate_vs_count('e', '100,000 rows, unflushed');
$node->safe_psql('postgres', q{SELECT rollout_flush('e'); SELECT rollout_merge('e');});
estimate_vs_count('e', '100,000 rows in the base');
is(plan_of('SELECT * FROM e WHERE id = 5')->{'Plan Rows'}, 1, 'a key equality is one row');

# ---------------------------------------------------------------------------
# (b) ANALYZE: three versions of every key, and the statistics of the live
# ones; a statistics target of 10 (3,000 sampled rows) makes the sample a
# real one of the 20,000 live rows (clusters left out, the reservoir used)
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE a (id int, grp int, tag text) SERVER s OPTIONS (store 'an');
INSERT INTO a SELECT i, 0, 'old' FROM generate_series(1, 20000) i;
SELECT rollout_flush('a');
INSERT INTO a SELECT i, -1, 'older' FROM generate_series(1, 20000, 2) i;
SELECT rollout_flush('a'); SELECT rollout_merge('a');
INSERT INTO a SELECT i, i % 50, CASE WHEN i % 10 = 0 THEN 'rare' ELSE 'common' END
  FROM generate_series(1, 20000) i;});
for my $target (100, 10)
{
	my ($analyze_out, $analyze_err);
	$node->psql('postgres', "SET default_statistics_target = $target; ANALYZE VERBOSE a",
		stdout => \$analyze_out, stderr => \$analyze_err);
	unlike($analyze_err, qr/cannot analyze|WARNING/, "target $target: ANALYZE runs without a warning");
	like($analyze_err, qr/store "an" holds 20000 live rows; (\d+) sampled/,
		"target $target: ANALYZE VERBOSE says how many live rows it saw");
	my ($sampled) = $analyze_err =~ /store "an" holds 20000 live rows; (\d+) sampled/;
	$sampled //= -1;
	if ($target == 10)
	{
		cmp_ok($sampled, '>', 1000, "target 10: a sample of $sampled rows");
		cmp_ok($sampled, '<=', 3000, 'at most the 3,000 rows the target asks for');
	}
	is($node->safe_psql('postgres', q{SELECT reltuples FROM pg_class WHERE relname = 'a'}),
		'20000', "target $target: reltuples is the live row count, not the 50,000 versions");
	is($node->safe_psql('postgres', q{SELECT n_distinct FROM pg_stats WHERE tablename = 'a' AND attname = 'grp'}),
		'50', "target $target: n_distinct of grp is 50, the live versions' (old versions had 0 and -1)");
	is($node->safe_psql('postgres',
			q{SELECT most_common_vals FROM pg_stats WHERE tablename = 'a' AND attname = 'tag'}),
		'{common,rare}', "target $target: the most common values are the live ones");
}

# estimates from those statistics, once compaction left one version per key
$node->safe_psql('postgres', q{SELECT rollout_flush('a'); SELECT rollout_merge('a');
SELECT rollout_compact('a', min_fragments => 1); ANALYZE a;});
is($node->safe_psql('postgres', q{SELECT row_count FROM rollout_observe('a')}), '20000',
	'compaction left one version per key');
within_2x(plan_of(q{SELECT * FROM a WHERE tag = 'rare'})->{'Plan Rows'}, 2000,
	'a filter estimate from the most common values');
within_2x(plan_of(q{SELECT * FROM a WHERE grp < 5})->{'Plan Rows'}, 2000,
	'a range estimate from the histogram');

# ---------------------------------------------------------------------------
# (c) sorted output
$node->safe_psql('postgres', q{
CREATE FOREIGN TABLE u (id uuid, v int) SERVER s OPTIONS (store 'sorted_uuid');
CREATE FOREIGN TABLE tc (id text COLLATE "C", v int) SERVER s OPTIONS (store 'sorted_text_c');
CREATE FOREIGN TABLE tl (id text COLLATE "und-x-icu", v int) SERVER s OPTIONS (store 'sorted_text_icu');
CREATE TABLE h (id text, v int);
INSERT INTO h SELECT md5(i::text), i FROM generate_series(1, 3000) i;
INSERT INTO h VALUES ('B', -1), ('a', -2), ('_z', -3), ('Ab', -4);
INSERT INTO u SELECT md5(i::text)::uuid, i FROM generate_series(1, 3000) i;
INSERT INTO tc SELECT id, v FROM h;
INSERT INTO tl SELECT id, v FROM h;
SELECT rollout_flush('u'), rollout_flush('tc'), rollout_flush('tl');
INSERT INTO u SELECT md5(i::text)::uuid, -i FROM generate_series(1, 3000, 7) i;
INSERT INTO tc SELECT id, -v FROM h WHERE v % 7 = 0;
INSERT INTO tl SELECT id, -v FROM h WHERE v % 7 = 0;});

for my $case (
	[ 'e', 'id', 'bigint' ],
	[ 'u', 'id', 'uuid' ],
	[ 'tc', 'id', 'text COLLATE "C"' ])
{
	my ($table, $key, $type) = @$case;
	my @types = plan_node_types(plan_of("SELECT * FROM $table ORDER BY $key LIMIT 10"));
	ok(!grep({ $_ eq 'Sort' } @types), "$type key: ORDER BY key LIMIT 10 has no Sort (@types)");
	@types = plan_node_types(plan_of("SELECT * FROM $table ORDER BY $key DESC LIMIT 10"));
	ok(grep({ $_ eq 'Sort' } @types), "$type key: ORDER BY key DESC is sorted");
}
my @types = plan_node_types(plan_of('SELECT * FROM tl ORDER BY id LIMIT 10'));
ok(grep({ $_ eq 'Sort' } @types), 'text key under a non-"C" collation: ORDER BY key is sorted');

is($node->safe_psql('postgres', q{SELECT string_agg(id || ':' || v, ',') FROM (SELECT * FROM tc ORDER BY id) s}),
	$node->safe_psql('postgres', q{SELECT string_agg(id || ':' || v, ',') FROM
	  (SELECT id, CASE WHEN v % 7 = 0 THEN -v ELSE v END AS v FROM h ORDER BY id COLLATE "C") s}),
	'text under "C": rows in the heap\'s order under "C", newest versions');
is($node->safe_psql('postgres', q{SELECT string_agg(id, ',') FROM (SELECT id FROM tl ORDER BY id) s}),
	$node->safe_psql('postgres', q{SELECT string_agg(id, ',') FROM (SELECT id FROM h ORDER BY id COLLATE "und-x-icu") s}),
	'text under ICU: rows in the ICU order');
is($node->safe_psql('postgres', q{SELECT string_agg(id::text, ',') FROM (SELECT id FROM u ORDER BY id LIMIT 50) s}),
	$node->safe_psql('postgres', q{SELECT string_agg(id::text, ',') FROM (SELECT md5(i::text)::uuid AS id FROM generate_series(1, 3000) i ORDER BY 1 LIMIT 50) s}),
	'uuid key: ORDER BY id LIMIT 50 returns the 50 smallest keys');

# ORDER BY key LIMIT reads the first row groups only (e holds 200 of 500 rows)
my $limit = plan_of('SELECT * FROM e ORDER BY id LIMIT 10', 'ANALYZE, VERBOSE');
my $scan = find_plan_node($limit, 'Foreign Scan');
cmp_ok($scan->{'Row Groups Read'}, '<=', 2,
	"ORDER BY id LIMIT 10 over 200 row groups reads $scan->{'Row Groups Read'} of them");
is($node->safe_psql('postgres', 'SELECT string_agg(id::text, \',\') FROM (SELECT id FROM e ORDER BY id LIMIT 5) s'),
	'1,2,3,4,5', 'and returns the smallest keys');

# a merge join on the key sorts neither rollout side
my $merge = $node->safe_psql('postgres', q{
SET enable_hashjoin = off; SET enable_nestloop = off;
EXPLAIN (COSTS OFF) SELECT * FROM u JOIN u AS u2 USING (id);});
like($merge, qr/Merge Join/, 'a merge join on the key');
unlike($merge, qr/Sort/, 'with no Sort on either side');
is($node->safe_psql('postgres', q{
SET enable_hashjoin = off; SET enable_nestloop = off;
SELECT count(*), sum(u.v + u2.v) FROM u JOIN u AS u2 USING (id);}),
	$node->safe_psql('postgres', 'SELECT count(*), sum(2 * v) FROM u'),
	'and joins every key once');

# ---------------------------------------------------------------------------
# (d) key joins: 50 ids against the 100,000 rows of e (200 row groups)
$node->safe_psql('postgres', q{
CREATE TABLE ids (id bigint, note text);
INSERT INTO ids SELECT i * 997 % 100000 + 1, 'n' || i FROM generate_series(1, 50) i;
INSERT INTO ids VALUES (-5, 'absent');
ANALYZE ids;});
my $expected = $node->safe_psql('postgres', q{
SET enable_nestloop = off;
SELECT count(*), sum(e.grp), string_agg(e.id::text, ',' ORDER BY e.id) FROM ids JOIN e ON e.id = ids.id;});
for my $join (
	[ 'ON', 'SELECT e.* FROM ids JOIN e ON e.id = ids.id' ],
	[ 'USING', 'SELECT e.* FROM ids JOIN e USING (id)' ],
	[ 'LATERAL', 'SELECT s.* FROM ids, LATERAL (SELECT * FROM e WHERE e.id = ids.id OFFSET 0) s' ],
	[ 'ON plus a key range', 'SELECT e.* FROM ids JOIN e ON e.id = ids.id WHERE e.id > 0' ])
{
	my ($kind, $sql) = @$join;
	my $plan = plan_of($sql, 'ANALYZE, VERBOSE');
	my $scan = find_plan_node($plan, 'Foreign Scan');
	is($plan->{'Node Type'}, 'Nested Loop', "$kind: the planner picks a nested loop");
	is($scan->{'Key Conditions'}, $kind =~ /range/ ? 2 : 1,
		"$kind: the join clause is a key condition of the inner scan");
	is($scan->{'Actual Loops'}, 51, "$kind: one lookup per outer row");
	cmp_ok($scan->{'Row Groups Read'}, '<=', 51,
		"$kind: at most a row group per lookup ($scan->{'Row Groups Read'} for 51 lookups of 200 row groups)");
	is( $node->safe_psql('postgres',
			"SELECT count(*), sum(grp), string_agg(id::text, ',' ORDER BY id) FROM ($sql) q"),
		$expected, "$kind: the same rows as a hash join");
}
like($expected, qr/^50\|/, 'the join finds the 50 present ids and not the absent one');
my $left = plan_of('SELECT ids.note, e.grp FROM ids LEFT JOIN e ON e.id = ids.id', 'ANALYZE');
is($left->{'Node Type'}, 'Nested Loop', 'LEFT JOIN: a nested loop of lookups');
is($node->safe_psql('postgres', q{SELECT count(*), count(e.id) FROM ids LEFT JOIN e ON e.id = ids.id}),
	'51|50', 'LEFT JOIN: every outer row, the absent id with NULLs');

# (e) one column following the key, one random
$node->safe_psql(
	'postgres', q{
CREATE FOREIGN TABLE z (id int, t int, r int, pad text) SERVER s OPTIONS (store 'zones');
CREATE TABLE z_heap AS SELECT g AS id, g * 10 AS t, (g * 7919) % 200000 AS r, repeat('p', 50) AS pad
  FROM generate_series(1, 200000) g;
INSERT INTO z SELECT * FROM z_heap;
SELECT rollout_flush('z');
SELECT rollout_merge('z');
ANALYZE z;
});
is($node->safe_psql('postgres',
		q{SELECT attname, round(abs(correlation)::numeric, 1) FROM pg_stats WHERE tablename = 'z' AND attname IN ('t', 'r') ORDER BY attname}),
	"r|0.0
t|1.0", '(e) correlation with the key order: 1 for t, 0 for r');
my $parallel = q{SET min_parallel_table_scan_size = 0; SET parallel_setup_cost = 10;};
my $narrow_t = 'SELECT * FROM z WHERE t >= 500000 AND t < 520000';
my $narrow_r = 'SELECT * FROM z WHERE r >= 50000 AND r < 52000';
my @t_types = plan_node_types(decode_json($node->safe_psql('postgres',
			"$parallel EXPLAIN (FORMAT JSON) $narrow_t"))->[0]{Plan});
my @r_types = plan_node_types(decode_json($node->safe_psql('postgres',
			"$parallel EXPLAIN (FORMAT JSON) $narrow_r"))->[0]{Plan});
is(join(',', @t_types), 'Foreign Scan', '(e) 1 % of a column that follows the key: a serial scan');
ok((grep { $_ eq 'Gather' } @r_types), '(e) 1 % of a random column: a parallel scan of everything')
  or diag(join(',', @r_types));
for my $sql ($narrow_t, $narrow_r)
{
	(my $heap = $sql) =~ s/FROM z /FROM z_heap /;
	is($node->safe_psql('postgres', "$parallel SELECT count(*), sum(id) FROM ($sql) q"),
		$node->safe_psql('postgres', "SELECT count(*), sum(id) FROM ($heap) q"),
		"(e) the same rows as the heap: $sql");
}

done_testing();
