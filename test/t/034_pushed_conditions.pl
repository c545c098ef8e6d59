
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
# Remote modes: plain  (reads through the store, the same whatever the writer; scripts/test.sh)
#
# 034_pushed_conditions.pl — a scan checks simple conditions on any column
# on the winning version of each key before it decodes the rest of the row
# (fdw/scan_filter.c, read/row_filter.c), and decodes the columns other than
# the key only for the rows it returns (read/row_source.c), page by page
# (pages of 1 kB here, so that chunks have several).  Neither may change a
# result:
#   (a) over a store whose keys have versions in two base fragments, two
#       generations, the unflushed tail (WAL entries or the memtable) and the
#       transaction's own rows, every query of a list of conditions (each
#       pushed-down form, NULLs, empty arrays, collations, cross-type
#       operators, key and non-key together) returns what the same query
#       returns on a heap table holding the newest versions;
#   (b) with old versions matching and new ones not, and the reverse, at
#       every step between those layers, only the newest version decides;
#   (c) the same answers with push_down_conditions, decode_late and
#       use_key_filters all off, and with use_zone_maps off;
#   (d) parameters: a generic plan's $1 and a correlated subquery's outer
#       value (a rescan per outer row) are pushed down and evaluated anew;
#   (e) EXPLAIN shows the pushed conditions, the rows the store filtered and
#       the chunks it never decoded, and a key lookup decodes one page of
#       each column it returns; volatile values, text-encoded (enum)
#       columns and non-leakproof operators under a security barrier are
#       not pushed down, and such a view leaks no row it hides;
#   (f) incompressible values in pages of 1 kB (a frame per page costs more
#       than one per chunk) are written and read back.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(mode_node);
use Test::More;

my $node = mode_node('pushed_conditions',
	conf => ['rollout_fdw.rows_per_group = 32', 'rollout_fdw.page_size = 1']);
my $store = RolloutStore->for_test('034_pushed_conditions');
$store->create_extension_and_server($node);

my $columns = 'id int, grp int, name text, score float8, ts timestamptz, payload jsonb';
$node->safe_psql('postgres', qq{
CREATE FOREIGN TABLE t ($columns) SERVER s OPTIONS (store 'pd', key 'id');
CREATE TABLE o ($columns, PRIMARY KEY (id));});

my $seed = $ENV{ROLLOUT_TEST_SEED} // 34;
note("seed $seed");
srand($seed);
my @names = ('alpha', 'Beta', 'beta', 'gamma', 'DELTA', "\xc3\xa9psilon", undef);

# One row's VALUES text: random values, or the given grp
sub row_values
{
	my ($id, $round, $grp) = @_;
	$grp //= int(rand(6));
	my $name = $names[ int(rand(@names)) ];
	my $score = rand() < 0.1 ? 'NULL' : int(rand(80)) / 4;
	my $minute = int(rand(600));
	my $payload = rand() < 0.05 ? 'NULL'
	  : sprintf(q{'{"round": %d, "odd": %s, "pad": "%s"}'}, $round,
		$id % 2 ? 'true' : 'false', 'x' x int(rand(200)));
	$name = defined $name ? "'$name'" : 'NULL';
	return "($id, $grp, $name, $score, "
	  . "'2026-01-01 00:00+00'::timestamptz + interval '$minute minutes', $payload)";
}

# Insert rows into the rollout table and upsert them into the oracle.
sub write_rows
{
	my ($rows, $then) = @_;
	my $values = join(",\n", @$rows);
	return qq{
INSERT INTO t VALUES $values;
INSERT INTO o VALUES $values ON CONFLICT (id) DO UPDATE SET
  grp = excluded.grp, name = excluded.name, score = excluded.score,
  ts = excluded.ts, payload = excluded.payload;
} . ($then // '');
}

# The rows of a round: new versions of a random part of the keys, plus the
# adversarial keys of (b): 1001 + 2k and 1002 + 2k take grp 7 and 8 so that
# at step k the old version matches grp = 7 and the new does not (odd), or
# the reverse (even).
sub round_rows
{
	my ($round, $first_new, $last_new) = @_;
	my @rows;
	for my $id (1 .. $first_new - 1)
	{
		push @rows, row_values($id, $round) if rand() < 0.4;
	}
	push @rows, row_values($_, $round) for $first_new .. $last_new;
	# step k goes from the layer of round k + 1 to that of round k + 2
	for my $k (0 .. 4)
	{
		my ($old_match, $new_miss) = (1001 + 2 * $k, 1002 + 2 * $k);
		if ($k == $round - 1)    # the old versions of step k
		{
			push @rows, row_values($old_match, $round, 7),
			  row_values($new_miss, $round, 8);
		}
		elsif ($k == $round - 2)    # the new versions of step k
		{
			push @rows, row_values($old_match, $round, 8),
			  row_values($new_miss, $round, 7);
		}
	}
	return \@rows;
}

# Layers: two base fragments, two generations, an unflushed tail, and (in
# the transaction of the queries) the transaction's own rows.
$node->safe_psql('postgres',
	write_rows(round_rows(1, 1, 300), q{SELECT 1 FROM rollout_merge('t');}));
$node->safe_psql('postgres',
	write_rows(round_rows(2, 301, 400), q{SELECT 1 FROM rollout_merge('t');}));
$node->safe_psql('postgres',
	write_rows(round_rows(3, 401, 450), q{SELECT 1 FROM rollout_flush('t');}));
$node->safe_psql('postgres',
	write_rows(round_rows(4, 451, 500), q{SELECT 1 FROM rollout_flush('t');}));
$node->safe_psql('postgres', write_rows(round_rows(5, 501, 520)));
my $own_rows = write_rows(round_rows(6, 521, 530));
is($node->safe_psql('postgres', q{SELECT fragments, generations FROM rollout_observe('t')}),
	'2|2', 'two base fragments and two generations, besides the tail');

my $icu = $node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_collation WHERE collprovider = 'i'}) > 0;
$node->safe_psql('postgres',
	q{CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)})
  if $icu;

my @conditions = (
	'grp = 3', 'grp <> 3', 'grp < 2', 'grp >= 4', '3 > grp', 'grp = 7',
	'grp IN (1, 4)', q{grp = ANY ('{1,NULL}')}, q{grp <> ALL ('{1,2}')},
	q{grp <> ALL ('{1,NULL}')}, q{name = 'Beta'}, q{name < 'b' COLLATE "C"},
	q{name > 'b'}, q{name = ANY ('{}'::text[])}, q{name <> ALL ('{}'::text[])},
	'name IS NULL', 'name IS NOT NULL', 'score <= 10.5', 'score > 5',
	'score = 2.5::real', 'score IS NULL',
	q{ts >= '2026-01-01 01:00+00' AND ts < '2026-01-01 03:00+00'},
	q{payload @> '{"odd": true}'}, 'payload IS NULL', 'payload IS NOT NULL',
	'grp = 3 AND name IS NOT NULL AND score > 3', 'id > 100 AND grp = 2',
	'id IN (5, 17, 301, 1002)', q{grp = 7 AND payload->>'round' <> '0'},
	($icu ? (q{name = 'BETA' COLLATE ci}) : ()));

# Every query's rows, as text, in a transaction that first inserts its own
# rows (the newest layer) unless $own is false.
sub answers
{
	my ($table, $settings, $own) = @_;
	my $sql = join("\n",
		map { "SELECT \$c\$$_\$c\$, count(*), coalesce(string_agg(format('%s:%s:%s:%s:%s:%s', id, grp, name, score, ts, md5(payload::text)), ' ' ORDER BY id), '-') FROM $table WHERE $_;" }
		  @conditions);
	return $node->safe_psql('postgres',
		"SET timezone = 'UTC';\n$settings\nBEGIN;\n" . ($own ? $own_rows : '') . "$sql\nCOMMIT;");
}

# (a) and (b): in the transaction that inserts its own rows (into both
# tables) before it asks, and then commits them
my $rollout = answers('t', '', 1);
my $oracle = answers('o', '', 0);
is($rollout, $oracle, '(a) ' . scalar(@conditions)
	  . ' conditions over fragments, generations, the tail and own rows answer as the heap does');
like($oracle, qr/^grp = 7\|5\|1002:7:.* 1004:7:.* 1006:7:.* 1008:7:.* 1010:7:/m,
	'(b) grp = 7: only keys whose newest version matches, at every layer step');
unlike($oracle, qr/^grp = 7\|[^\n]*\b10(?:01|03|05|07|09):/m,
	'(b) no key whose older version matched');
is(answers('t', '', 0), $oracle, '(a) and again after the commit');

# (c)
is(answers('t', q{SET rollout_fdw.push_down_conditions = off;
SET rollout_fdw.decode_late = off; SET rollout_fdw.use_key_filters = off;}, 0),
	answers('o', '', 0), '(c) the same with pushing down, late decoding and key filters off');
is(answers('t', 'SET rollout_fdw.use_zone_maps = off;', 1), $oracle,
	'(c) the same with zone maps off');

# (d) parameters
my $grp7 = $node->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM o WHERE grp = 7});
is($node->safe_psql('postgres', q{SET plan_cache_mode = force_generic_plan;
PREPARE q(int) AS SELECT string_agg(id::text, ',' ORDER BY id) FROM t WHERE grp = $1;
EXECUTE q(3); EXECUTE q(7);}),
	$node->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM o WHERE grp = 3}) . "\n$grp7",
	'(d) a generic plan evaluates its parameter per execution');
my $correlated = q{SELECT string_agg(g || '=' || (SELECT count(*) FROM %s WHERE %s.grp = g), ',' ORDER BY g) FROM generate_series(0, 8) g};
is($node->safe_psql('postgres', sprintf($correlated, 't', 't')),
	$node->safe_psql('postgres', sprintf($correlated, 'o', 'o')),
	'(d) a correlated subquery: the outer value, evaluated at every rescan');
like($node->safe_psql('postgres', 'EXPLAIN (COSTS OFF) ' . sprintf($correlated, 't', 't')),
	qr/Pushed Conditions: 1/, '(d) and its condition is pushed down');

# (e) EXPLAIN
my $plan = $node->safe_psql('postgres',
	q{EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) SELECT * FROM t WHERE grp = 7});
my %f = map { $_ => ($plan =~ /"$_": (\d+)/)[0] }
  ('Pushed Conditions', 'Rows Filtered by Store', 'Late Chunks Decoded', 'Late Chunks Skipped', 'Actual Rows');
is($f{'Pushed Conditions'}, 1, '(e) EXPLAIN: one pushed condition');
is($f{'Actual Rows'}, 5, '(e) five rows returned');
cmp_ok($f{'Rows Filtered by Store'}, '>', 500, "(e) $f{'Rows Filtered by Store'} rows filtered by the store");
cmp_ok($f{'Late Chunks Skipped'}, '>', $f{'Late Chunks Decoded'},
	"(e) chunks decoded late: $f{'Late Chunks Decoded'}, never decoded: $f{'Late Chunks Skipped'}");
$plan = $node->safe_psql('postgres',
	q{SET rollout_fdw.use_key_filters = off; EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) SELECT * FROM t WHERE id = 17});
my %l = map { $_ => ($plan =~ /"$_": (\d+)/)[0] }
  ('Late Chunks Decoded', 'Late Pages Decoded', 'Actual Rows');
is($l{'Actual Rows'}, 1, '(e) a key lookup finds its row');
is($l{'Late Pages Decoded'}, $l{'Late Chunks Decoded'},
	"(e) and decodes one page of each of the $l{'Late Chunks Decoded'} chunks it needs");
$plan = $node->safe_psql('postgres',
	q{EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) SELECT * FROM t});
%l = map { $_ => ($plan =~ /"$_": (\d+)/)[0] } ('Late Chunks Decoded', 'Late Pages Decoded');
cmp_ok($l{'Late Pages Decoded'}, '>', $l{'Late Chunks Decoded'},
	"(e) where a full scan decodes $l{'Late Pages Decoded'} pages of $l{'Late Chunks Decoded'} chunks");
$plan = $node->safe_psql('postgres',
	q{EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM t WHERE grp = 7 AND payload IS NOT NULL});
is(($plan =~ /"Pushed Conditions": (\d+)/)[0], 2, '(e) IS NOT NULL is pushed down too');

unlike($node->safe_psql('postgres', q{EXPLAIN SELECT * FROM t WHERE grp = (random() * 0)::int}),
	qr/Pushed Conditions/, '(e) a volatile value is not pushed down');
$node->safe_psql('postgres', q{
CREATE TYPE mood AS ENUM ('sad', 'ok');
CREATE FOREIGN TABLE e (id int, m mood) SERVER s OPTIONS (store 'pd_enum');
INSERT INTO e VALUES (1, 'sad'), (2, 'ok'), (3, 'ok');});
unlike($node->safe_psql('postgres', q{EXPLAIN SELECT * FROM e WHERE m = 'ok'}),
	qr/Pushed Conditions/, '(e) a condition on an enum (stored as text) is not pushed down');
is($node->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM e WHERE m = 'ok'}),
	'2,3', '(e) and still answered');

# a non-leakproof operator that tells what it sees, under a security barrier
$node->safe_psql('postgres', q{
CREATE FUNCTION tattle(int, int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE STRICT
  AS $$BEGIN RAISE NOTICE 'saw %', $1; RETURN true; END$$;
CREATE OPERATOR <<< (FUNCTION = tattle, LEFTARG = int, RIGHTARG = int);
CREATE VIEW only7 WITH (security_barrier) AS SELECT * FROM t WHERE grp = 7;});
unlike($node->safe_psql('postgres', q{EXPLAIN SELECT * FROM only7 WHERE grp <<< 0}),
	qr/Pushed Conditions: 2/, '(e) a non-leakproof operator above a security barrier stays above it');
my ($stdout, $stderr);
$node->psql('postgres', q{SELECT count(*) FROM only7 WHERE grp <<< 0},
	stdout => \$stdout, stderr => \$stderr);
is($stdout, '5', '(e) the view returns its rows');
my @seen = $stderr =~ /saw (\d+)/g;
is(join(',', sort { $a <=> $b } @seen), '7,7,7,7,7', '(e) and the operator saw only the rows the view shows');

# a user's polymorphic operator works out its argument types from the call's
# expression, which the scan's calls lack: it stays with PostgreSQL
$node->safe_psql('postgres', q{
CREATE FUNCTION poly_eq(anyelement, anyelement) RETURNS boolean LANGUAGE plpgsql IMMUTABLE STRICT
  AS $$BEGIN RETURN $1 = $2; END$$;
CREATE OPERATOR === (FUNCTION = poly_eq, LEFTARG = anyelement, RIGHTARG = anyelement);});
unlike($node->safe_psql('postgres', q{EXPLAIN SELECT * FROM t WHERE grp === 7}),
	qr/Pushed Conditions/, '(e) a condition with a user\'s polymorphic operator is not pushed down');
is($node->safe_psql('postgres', q{SELECT count(*) FROM t WHERE grp === 7}),
	$node->safe_psql('postgres', q{SELECT count(*) FROM t WHERE grp = 7}),
	'(e) and is answered as with =');

# (f) 4,096 rows of 48 random-looking bytes per row group: ~190 pages a chunk
my $random_rows = q{SELECT g AS id,
  decode(md5(g || 'a') || md5(g || 'b') || md5(g || 'c'), 'hex') AS b,
  CASE WHEN g % 3 = 0 THEN NULL ELSE ((g::bigint * 2654435761) % 2147483647)::int END AS n
FROM generate_series(1, 9000) g};
my $random_digest = q{SELECT count(*), count(n), sum(n), md5(string_agg(b::text, ',' ORDER BY id)) FROM %s};
$node->safe_psql('postgres', qq{
CREATE FOREIGN TABLE rnd (id int, b bytea, n int) SERVER s OPTIONS (store 'pd_random');
SET rollout_fdw.rows_per_group = 4096;
INSERT INTO rnd $random_rows;
SELECT rollout_flush('rnd');});
is($node->safe_psql('postgres', sprintf($random_digest, 'rnd')),
	$node->safe_psql('postgres', sprintf($random_digest, "($random_rows) r")),
	'(f) incompressible values in many pages read back');
is($node->safe_psql('postgres', q{SELECT n FROM rnd WHERE id = 4097}),
	$node->safe_psql('postgres', qq{SELECT n FROM ($random_rows) r WHERE id = 4097}),
	'(f) and a lookup finds its row');

$node->stop;
done_testing();
